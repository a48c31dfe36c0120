"""What operators watch and drive: metrics and who may read them, health, shutdown."""
