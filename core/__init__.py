"""What the API (``service``) and the workers (``worker``) share."""
