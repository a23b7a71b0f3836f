"""Commands that act on a deployment, local or on AWS (host-only: never copied into an image)."""
