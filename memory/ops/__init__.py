"""What an operator watches: Prometheus metrics and the process's heap."""
