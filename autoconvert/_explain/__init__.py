"""explain(): what a product decided, in words, read from its description."""
