"""Resources: the API client (``resources.api``) and the warehouse writers (``resources.warehouse``)."""
