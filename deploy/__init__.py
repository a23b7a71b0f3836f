"""`email-handler deploy`, `destroy` and `replay`: the function images to ECR and a wired production stack.

deploy.plan is the one converge step (describe -> compare -> note -> apply, dry run); deploy.main runs
preflight, images, resources, iam, lambdas, triggers, receiving, alarms and the dashboard in dependency
order; deploy.destroy removes it all again; deploy.replay re-invokes failed asynchronous events. Nothing here
knows the local modes: local/provision.py runs this package's plan on the emulator.
"""
