def run(): print("demo"); return 0
