9
m1lab-mi-m *€‰¨Ì2 ¢ªÌ:8BRTX4090J	cn-east-19
m2lab-mi-m *ÓÊÏ2°‹ËÏ:8BRTX4090J	cn-east-1