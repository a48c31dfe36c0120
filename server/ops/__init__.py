"""What operators watch and drive: metrics and who may read them, health, shutdown, the 503 of a database outage."""
