
f-1lab-ai-2 * —îÊ2ĞëîÊ:8BRTX4090J	cn-east-1