"""Screens of the app: the main debugger screen and the prompt dialog."""
