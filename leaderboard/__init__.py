"""leaderboard package."""
