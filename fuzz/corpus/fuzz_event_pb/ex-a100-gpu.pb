
i-a2-gpu-0002lab-ai-a2 *à›’Ë2ð·’Ë:8BA100-80GJ	cn-east-1