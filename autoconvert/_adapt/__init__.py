"""adapt(): each parameter converted as its annotation asks, results in the caller's kind."""
