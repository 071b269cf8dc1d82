"""The frontends' way to a backend, torch-free: the HTTP client, a local backend started as its
own process group, and "connect to a URL or start one" written once."""

from .http import BackendError, Client, JobFailed, encode_image

__all__ = ["BackendError", "Client", "JobFailed", "encode_image"]
