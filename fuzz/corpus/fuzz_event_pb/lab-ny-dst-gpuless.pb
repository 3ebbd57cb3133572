
f-5lab-nyi-1 *è®´Í2øÊ´Í:1.5BRTX4090J	cn-east-1