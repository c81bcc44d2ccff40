def run(quick=False, only=None): return 0
