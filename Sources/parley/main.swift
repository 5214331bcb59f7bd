import ParleyServer
print("parley: not built yet")
