// ParleyServer module.
