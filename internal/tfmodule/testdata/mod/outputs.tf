output "url" {
  description = "Where."
  value       = ctr_cube.this[0].url
}

output "secret" {
  value     = var.token
  sensitive = true
}
