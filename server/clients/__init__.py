"""Who is connected: browser sessions."""
