
f-oldlab-ai-2 *ÿÿÿÿÿÿÿÿÿ€Êµî2€åšw:8BRTX4090J	cn-east-1
f-old-2