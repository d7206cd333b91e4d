"""The local services behind `make server`: a PostgreSQL cluster for the Prefect server's database and a static file
server for the dashboards and Data Docs that Prefect artifacts link to. Prefect-free, so tests start them too."""
