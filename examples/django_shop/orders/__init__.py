"""Orders: placed, watched until shipped (seed 004), confirmed by email."""
