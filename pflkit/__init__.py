"""The `pflkit` console command: wiring of the packages' command groups."""
