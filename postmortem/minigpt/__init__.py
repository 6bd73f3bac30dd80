"""The mini-GPT lab: a real model that misbehaves on request, and the sample runs it makes."""
