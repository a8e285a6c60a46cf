"""What the tests share: servers, clusters, clients, organizations, requests by hand."""
