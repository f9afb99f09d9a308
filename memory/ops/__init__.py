"""What an operator watches: Prometheus metrics, the process's heap, and stored text made safe to print."""
