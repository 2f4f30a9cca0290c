"""benchmark package."""
