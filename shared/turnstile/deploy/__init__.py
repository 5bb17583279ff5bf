"""What a deployment uploads: the functions' source and the job's files."""
