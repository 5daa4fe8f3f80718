"""The readers of every input the fold takes, and the one definition of what they may hold."""
