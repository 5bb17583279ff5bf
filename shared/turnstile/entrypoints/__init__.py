"""What the Cloud Functions and Lambda handlers call, and where their clients are built."""
