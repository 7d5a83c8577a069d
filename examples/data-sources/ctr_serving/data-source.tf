# A client's workspace finds the prediction endpoint, and the model version it answers with.
data "ctr_serving" "ads" {
  namespace = "ctr-prod"
  name      = "ctr-serving"
}

output "serving_url" {
  value = data.ctr_serving.ads.url
}

output "model_id" {
  value = data.ctr_serving.ads.model_id
}
