"""accountant package."""
