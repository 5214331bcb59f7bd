// ParleyCore module.
