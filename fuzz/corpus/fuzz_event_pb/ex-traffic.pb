
i-a1-traffic-0213lab-ai-a1 *€êÊ2€ÀïÊ:244819501496J	cn-east-1