// SPDX-License-Identifier: GPL-3.0-or-later
#include "util/atomic_file.h"

#include "util/error.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace engine {

namespace {

[[noreturn]] void fail(const std::filesystem::path& path, const char* what, int err)
{
    throw IoError("could not write " + path.string() + ": " + what + ": " + std::strerror(err));
}

// Closes and removes the temporary file unless it was renamed into place.
struct TempFile {
    std::string name;
    int fd = -1;
    bool keep = false;
    ~TempFile()
    {
        if (fd >= 0)
            ::close(fd);
        if (!keep && !name.empty())
            ::unlink(name.c_str());
    }
};

} // namespace

void write_file_atomically(const std::filesystem::path& path, std::string_view bytes)
{
    if (path.filename().empty())
        throw IoError("could not write " + path.string() + ": not a file name");
    const std::filesystem::path dir = path.has_parent_path() ? path.parent_path() : std::filesystem::path(".");

    // The mode to give the new file: an existing regular file's own, else 0666 less the umask.
    struct stat old {};
    mode_t mode;
    if (::lstat(path.c_str(), &old) == 0 && S_ISDIR(old.st_mode))
        throw IoError("could not write " + path.string() + ": it is a folder");
    if (::lstat(path.c_str(), &old) == 0 && S_ISREG(old.st_mode)) {
        mode = old.st_mode & 07777;
    } else {
        const mode_t mask = ::umask(0);
        ::umask(mask);
        mode = 0666 & ~mask;
    }

    TempFile tmp;
    // Built piece by piece (GCC 12's -Wrestrict misfires on a chain of string concatenations).
    tmp.name = dir.string();
    tmp.name += "/.";
    tmp.name += path.filename().string();
    tmp.name += ".tmp-XXXXXX";
    tmp.fd = ::mkostemp(tmp.name.data(), O_CLOEXEC);
    if (tmp.fd < 0) {
        const int err = errno;
        tmp.name.clear(); // nothing was created
        fail(path, "creating a temporary file in its folder", err);
    }
    if (::fchmod(tmp.fd, mode) != 0)
        fail(path, "setting permissions", errno);
    std::size_t done = 0;
    while (done < bytes.size()) {
        const ssize_t n = ::write(tmp.fd, bytes.data() + done, bytes.size() - done);
        if (n < 0) {
            if (errno == EINTR)
                continue;
            fail(path, "writing", errno);
        }
        if (n == 0)
            fail(path, "writing", EIO);
        done += std::size_t(n);
    }
    if (::fsync(tmp.fd) != 0)
        fail(path, "flushing to disk", errno);
    const int fd = tmp.fd;
    tmp.fd = -1;
    if (::close(fd) != 0)
        fail(path, "closing", errno);
    if (::rename(tmp.name.c_str(), path.c_str()) != 0)
        fail(path, "renaming the temporary file into place", errno);
    tmp.keep = true;
    // The rename itself reaches the disk with the folder.
    if (const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dfd >= 0) {
        ::fsync(dfd);
        ::close(dfd);
    }
}

} // namespace engine
