"""The leaderboard's routes, one module per concern (``leaderboard.web`` gathers them).

``pages.py`` the public pages and plots; ``exports.py`` the JSON and CSV exports;
``organiser.py`` the organisers' view and actions; ``login.py`` the organisers' sign-in session;
``deps.py`` the typed dependencies they share; ``templating.py`` the page templates.
"""
