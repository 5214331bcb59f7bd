// ParleyHTTP module.
