"""`email-handler deploy`: the function images to ECR and a wired production stack, idempotently.

deploy.main runs the steps; deploy.images publishes the images; deploy.stack creates or converges
the Lambda functions and everything around them; deploy.iam holds the least-privilege policies;
deploy.preflight checks credentials, region, secrets and SES before anything changes.
"""
