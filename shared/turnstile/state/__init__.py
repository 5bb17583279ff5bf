"""The documents turnstile keeps in storage (records) and the job contract over them: a job's
manifest in, its result records and done signal out, and the spool to a warm driver."""
