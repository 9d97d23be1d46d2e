"""The REST API's entry points, one subpackage per domain: thin views and serializers over services.

They sit above every domain app (they may import any of them, none imports them), so a view can
combine a job, its policy and the caller's grants without the domain apps importing each other.
"""
