"""What `sam build` wrote, run as Lambda runs it: a fresh python3.12, the function's directory, the layer
of this machine's architecture and the oldest boto3 the layer claims to support, nothing else."""
