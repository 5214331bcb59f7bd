// ParleyIO module.
