
m2lab-mi-m *ÓÊÏ2°‹ËÏ:8BRTX4090J	cn-east-1