"""The troubleshooting order, automated: findings from measurements and lint."""
