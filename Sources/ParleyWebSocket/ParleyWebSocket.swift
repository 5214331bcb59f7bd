// ParleyWebSocket module.
