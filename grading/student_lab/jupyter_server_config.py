"""The students' JupyterLab: a notebook opens as saved, not as changed.

When a kernel starts, JupyterLab writes the language it reports (Python's exact version among it)
into the notebook's metadata and counts that as a change. The released notebooks say only
``"language_info": {"name": "python"}`` (they are made on the instructor's machine, whose Python
is not the student's), so every notebook opened marked unsaved. This server hands a notebook out
with that metadata filled in as its Python kernel will report it (ipykernel's, the Python of this
server), and the file on disk is left as it is until the student saves.
"""

from jupyter_server.services.contents.largefilemanager import AsyncLargeFileManager


def language_info() -> dict:
    """What a Python kernel of this environment reports as its language."""
    from ipykernel.ipkernel import IPythonKernel

    return dict(IPythonKernel.language_info)


class CourseContents(AsyncLargeFileManager):
    """The server's usual contents, with a Python notebook's ``language_info`` filled in."""

    async def get(self, path, content=True, type=None, format=None, **kwargs):  # noqa: A002
        model = await super().get(path, content=content, type=type, format=format, **kwargs)
        notebook = model.get("content") if model.get("type") == "notebook" else None
        if notebook is not None:
            info = notebook.metadata.setdefault("language_info", {})
            if info.get("name", "python") == "python":
                for key, value in language_info().items():
                    info.setdefault(key, value)
        return model


c.ServerApp.contents_manager_class = CourseContents  # noqa: F821 (the config object)
