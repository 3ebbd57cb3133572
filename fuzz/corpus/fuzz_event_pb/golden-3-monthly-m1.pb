
m1lab-mi-m *€‰¨Ì2 ¢ªÌ:8BRTX4090J	cn-east-1