"""What the services beside the node share (the schema registry, the console, Connect):
serving a starlette app on plain-HTTP listeners until SIGTERM. Imports no other odradek
package; every service package may import it."""
