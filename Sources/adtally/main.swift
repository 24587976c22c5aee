import AdTally
print("adtally")
