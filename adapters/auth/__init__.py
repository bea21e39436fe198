"""Bearer tokens: verification against the issuer's keys (PyJWT), permissions and tenant read
from claims, and the reference's authorization service (plugin mode)."""
